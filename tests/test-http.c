/*
 * test-http.c - the server's HTTP/1.1 (src/server/http-*.c) on raw sockets:
 * the bytes are written as a client (or an attacker) would, and the whole
 * reply is read until the server closes. Every malformed or unservable
 * request (RFC 9112: an invalid or doubled Content-Length, Content-Length
 * with Transfer-Encoding, a coding other than chunked, no Host, bare CR or
 * LF, line folding, heads and lines over the limits, broken chunks, HTTP/2)
 * gets exactly one response, with its 4xx/5xx status, the JSON error body
 * and a request id, and then the connection closes: the bytes after it are
 * never served as another request. What is valid passes: keep-alive and
 * pipelining, chunk extensions and trailers, identical Content-Length
 * values, HTTP/1.0, absolute-form targets, HEAD, 100-continue. The body
 * limit: a declared length over it is refused at once, a chunked body of
 * exactly the limit passes and one byte more does not. Two Authorization
 * fields are refused. Then the parser alone: fed a byte at a time it finds
 * what it finds whole.
 *
 * The server runs in-process on port 0 over the tiny synthetic model. Waits
 * are bounded (a server that never answers fails the test after 10 s), never
 * what a test passes on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/timing.h"     // defines: jev_now_ms
#include "jev.h"             // defines: jev_decide_json
#include "server/http-int.h" // defines: http_scan_head, http_head_parse, http_body_step
#include "server/server.h"   // defines: jev_server_start, jev_server_port
#include "tiny-model.h"      // defines: tiny_decider_open

#define WAIT_MS 10000 /* the most a reply may take: a failure bound, nothing passes on it */

static struct jev_model *model;
static struct jev_engine *engine;
static struct jev_decider *decider;
static struct jev_server *server;
static int port;

static int setup(void **state) {
    (void)state;
    char dir[1024];
    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_tokens = 2048;
    ep.max_batch = 8;
    if (tiny_decider_open("http", 2, &ep, dir, sizeof dir, &model, &engine, &decider) != 0)
        return -1;
    struct jev_server_params p = jev_server_default_params();
    p.port = 0;
    p.http_threads = 2;
    p.idle_timeout_s = 30; /* longer than WAIT_MS: a server waiting for bytes fails the test, not the clock */
    struct jev_error err = {0};
    if (jev_server_start(model, decider, &p, &server, &err) != JEV_OK) {
        fprintf(stderr, "start: %s\n", err.msg);
        return -1;
    }
    port = jev_server_port(server);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    jev_server_stop(server);
    jev_decider_close(decider);
    jev_engine_free(engine);
    jev_model_free(model);
    return 0;
}

/* ---- a raw client ---- */

static int dial(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static void put(int fd, const char *bytes, size_t n) {
    while (n) {
        ssize_t k = send(fd, bytes, n, MSG_NOSIGNAL);
        if (k <= 0)
            return; /* the server may close before reading everything: its reply is what counts */
        bytes += k;
        n -= (size_t)k;
    }
}

/* What came back on a connection. */
struct raw {
    char *buf; /* NUL-terminated */
    size_t len;
    bool closed; /* the server closed (EOF or reset) */
};

/* Reads until the server closes, or until the reply holds `until` (when non-NULL), or WAIT_MS. */
static struct raw slurp(int fd, const char *until) {
    struct raw r = {.buf = calloc(1, 1)};
    double end = jev_now_ms() + WAIT_MS;
    for (;;) {
        if (until && strstr(r.buf, until))
            break;
        int left = (int)(end - jev_now_ms());
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0)
            break;
        char tmp[65536];
        ssize_t k = recv(fd, tmp, sizeof tmp, 0);
        if (k <= 0) {
            r.closed = true;
            break;
        }
        r.buf = realloc(r.buf, r.len + (size_t)k + 1);
        memcpy(r.buf + r.len, tmp, (size_t)k);
        r.len += (size_t)k;
        r.buf[r.len] = '\0';
    }
    return r;
}

/* One exchange: the bytes, then everything until the server closes. */
static struct raw exchange(const char *bytes, size_t n) {
    int fd = dial();
    put(fd, bytes, n);
    struct raw r = slurp(fd, NULL);
    close(fd);
    return r;
}

/* ---- reading responses ---- */

struct resp {
    int status;
    char head[4096]; /* status line and fields */
    const char *body;
    size_t body_len;
};

/* The value of field name in a response head, into out ("" when absent). */
static void field(const struct resp *r, const char *name, char *out, size_t size) {
    out[0] = '\0';
    size_t k = strlen(name);
    for (const char *l = strstr(r->head, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
        const char *line = l + 2;
        if (strncasecmp(line, name, k) == 0 && line[k] == ':') {
            const char *v = line + k + 1;
            while (*v == ' ')
                v++;
            snprintf(out, size, "%.*s", (int)strcspn(v, "\r"), v);
            return;
        }
    }
}

/* Splits buf into responses (interim 1xx ones included); returns how many; *used = bytes parsed. */
static int split(const char *buf, size_t len, struct resp *out, int max, bool head_request, size_t *used) {
    size_t at = 0;
    int n = 0;
    while (n < max && at < len) {
        const char *h = buf + at;
        const char *end = strstr(h, "\r\n\r\n");
        if (strncmp(h, "HTTP/1.1 ", 9) != 0 || !end)
            break;
        struct resp *r = &out[n];
        size_t hl = (size_t)(end - h) + 4;
        snprintf(r->head, sizeof r->head, "%.*s", (int)hl, h);
        r->status = atoi(h + 9);
        char cl[32];
        field(r, "Content-Length", cl, sizeof cl);
        r->body = h + hl;
        r->body_len = r->status < 200 || head_request ? 0 : strtoul(cl, NULL, 10);
        if (at + hl + r->body_len > len)
            break;
        at += hl + r->body_len;
        n++;
    }
    *used = at;
    return n;
}

/* The reply is exactly one JSON error response of status and type, with the headers every
 * response carries, and the connection closed after it. */
static void expect_refusal(const char *what, const char *bytes, size_t n, int status, const char *type) {
    struct raw raw = exchange(bytes, n);
    struct resp r[4];
    size_t used = 0;
    int k = split(raw.buf, raw.len, r, 4, false, &used);
    if (k != 1 || used != raw.len || !raw.closed || r[0].status != status) {
        fprintf(stderr, "%s: %d responses, %zu of %zu bytes parsed, %s; reply:\n%s\n", what, k, used, raw.len,
                raw.closed ? "closed" : "NOT closed", raw.buf);
        fail_msg("%s: expected exactly one %d and a closed connection", what, status);
    }
    char v[256];
    field(&r[0], "Content-Type", v, sizeof v);
    assert_string_equal(v, "application/json");
    field(&r[0], "x-typesafe-request-id", v, sizeof v);
    assert_true(strncmp(v, "req_", 4) == 0);
    field(&r[0], "Connection", v, sizeof v);
    assert_true(strcasecmp(v, "close") == 0);
    char *body = strndup(r[0].body, r[0].body_len);
    json_t *j = json_loads(body, 0, NULL);
    if (!j)
        fail_msg("%s: the body is not JSON: %s", what, body);
    json_t *e = json_object_get(j, "error");
    assert_int_equal(json_object_size(j), 1);
    assert_int_equal(json_object_size(e), 3);
    if (strcmp(json_string_value(json_object_get(e, "type")), type) != 0)
        fail_msg("%s: type %s, expected %s", what, json_string_value(json_object_get(e, "type")), type);
    assert_int_equal(json_integer_value(json_object_get(e, "code")), status);
    assert_true(strlen(json_string_value(json_object_get(e, "message"))) > 0);
    json_decref(j);
    free(body);
    free(raw.buf);
}

#define REFUSE(bytes, status, type) expect_refusal(#bytes, bytes, sizeof bytes - 1, status, type)

static const char *const BAD = "invalid_request_error";
static const char *const BIG = "request_too_large_error";
static const char *const UNSUP = "not_supported_error";

/* ---- framing: RFC 9112 §6.1 and §6.3 ---- */

static void test_content_length_refusals(void **state) {
    (void)state;
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}", 400, BAD);
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, BAD);
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: +2\r\n\r\n{}", 400, BAD);
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: \r\n\r\n", 400, BAD);
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 0x10\r\n\r\n", 400, BAD);
    /* two different values, in two fields or one list: the first is not simply taken */
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\n"
           "{}GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
           400, BAD);
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 5\r\n\r\n{}GET /health HTTP/1.1\r\n\r\n", 400,
           BAD);
    /* a number past 2^64: over any limit */
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413, BIG);
}

static void test_transfer_encoding_refusals(void **state) {
    (void)state;
    /* Content-Length with Transfer-Encoding: 400 and close, and what follows the body is not served */
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
           "0\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n",
           400, BAD);
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
           "0\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n",
           400, BAD);
    /* chunked not last: the length cannot be known */
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nabc", 400, BAD);
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400, BAD);
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n",
           400, BAD);
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400, BAD);
    REFUSE("POST /v1/systemone HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, BAD);
    /* a coding jev does not decode, before chunked: 501 (RFC 9112 §6.1) */
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501, UNSUP);
    /* broken chunks */
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, BAD);
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}}\r\n0\r\n\r\n", 400,
           BAD);
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2 \r\n{}\r\n0\r\n\r\n", 400,
           BAD);
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\n{}\r\n0\r\n\r\n", 400, BAD);
    REFUSE("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n", 400,
           BAD);
}

/* ---- the head: RFC 9112 §2-§5 ---- */

static void test_head_refusals(void **state) {
    (void)state;
    REFUSE("GET /health HTTP/1.1\r\n\r\n", 400, BAD);                                     /* no Host */
    REFUSE("GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, BAD);               /* two */
    REFUSE("GET /health HTTP/1.1\nHost: x\n\n", 400, BAD);                                /* bare LF */
    REFUSE("GET /health HTTP/1.1\r\nHost: x\rX: y\r\n\r\n", 400, BAD);                    /* bare CR */
    REFUSE("GET /health HTTP/1.1\r\nHost: x\r\nX: a\r\n  folded\r\n\r\n", 400, BAD);      /* line folding */
    REFUSE("GET /health HTTP/1.1\r\nHost : x\r\n\r\n", 400, BAD);                         /* space before colon */
    REFUSE("GET /health HTTP/1.1\r\nHost: x\r\nX: a\x01b\r\n\r\n", 400, BAD);             /* control byte */
    REFUSE("GET /health HTTP/1.1\r\nHost: x\r\nX: a\0b\r\n\r\n", 400, BAD);               /* NUL */
    REFUSE("GET  /health HTTP/1.1\r\nHost: x\r\n\r\n", 400, BAD);                         /* two spaces */
    REFUSE("GET /health HTTP/1.1 \r\nHost: x\r\n\r\n", 400, BAD);                         /* trailing space */
    REFUSE("GET health HTTP/1.1\r\nHost: x\r\n\r\n", 400, BAD);                           /* not a path */
    REFUSE("GET /health HTTQ/1.1\r\nHost: x\r\n\r\n", 400, BAD);                          /* not a version */
    REFUSE("\x01\x02 \r\n\r\n", 400, BAD);                                                /* not HTTP */
    REFUSE("GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505, UNSUP);                        /* another major */
    REFUSE("GET /health HTTP/0.9\r\nHost: x\r\n\r\n", 505, UNSUP);                        /* */
    REFUSE("ABCDEFGHIJKLMNOPQRSTUVWXYZ /health HTTP/1.1\r\nHost: x\r\n\r\n", 501, UNSUP); /* method */
    /* a request line over 8 KiB, a head over 32 KiB, more than 100 fields */
    size_t n = 40 << 10;
    char *big = malloc(n + 64);
    assert_non_null(big);
    int k = snprintf(big, 64, "GET /");
    memset(big + k, 'a', 9000);
    k += 9000;
    k += snprintf(big + k, 64, " HTTP/1.1\r\nHost: x\r\n\r\n");
    expect_refusal("long request line", big, (size_t)k, 414, BIG);
    k = snprintf(big, 64, "GET /health HTTP/1.1\r\nHost: x\r\nX: ");
    memset(big + k, 'a', 34000);
    k += 34000;
    k += snprintf(big + k, 64, "\r\n\r\n");
    expect_refusal("large head", big, (size_t)k, 431, BIG);
    k = snprintf(big, 64, "GET /health HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 101; i++)
        k += snprintf(big + k, 32, "X%d: y\r\n", i);
    k += snprintf(big + k, 8, "\r\n");
    expect_refusal("101 fields", big, (size_t)k, 431, BIG);
    free(big);
}

/* ---- what is valid passes ---- */

/* Sends bytes on one connection and reads want final responses (the connection stays open). */
static int pipeline(const char *bytes, struct resp *out, int want, bool head_request, bool *closed, char **keep) {
    int fd = dial();
    put(fd, bytes, strlen(bytes));
    struct raw raw = {.buf = calloc(1, 1)};
    int n = 0;
    double end = jev_now_ms() + WAIT_MS;
    while (jev_now_ms() < end) {
        size_t used = 0;
        n = split(raw.buf, raw.len, out, 8, head_request, &used);
        int finals = 0;
        for (int i = 0; i < n; i++)
            finals += out[i].status >= 200;
        if (finals >= want || raw.closed)
            break;
        struct raw more = slurp(fd, "\r\n\r\n");
        raw.buf = realloc(raw.buf, raw.len + more.len + 1);
        memcpy(raw.buf + raw.len, more.buf, more.len + 1);
        raw.len += more.len;
        raw.closed = more.closed;
        free(more.buf);
        if (!more.len && !more.closed)
            break;
    }
    /* is the connection still open? a GET on it must be answered */
    put(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 34);
    struct raw after = slurp(fd, "{\"status\":\"ok\"}");
    *closed = !strstr(after.buf, "{\"status\":\"ok\"}");
    free(after.buf);
    close(fd);
    *keep = raw.buf; /* out[] points into it */
    return n;
}

static void test_keep_alive_and_pipelining(void **state) {
    (void)state;
    struct resp r[8];
    bool closed;
    char *buf;
    /* two requests in one write, the second after a body with a length: both answered, in order */
    int n = pipeline("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
                     "POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
                     "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
                     r, 3, false, &closed, &buf);
    assert_int_equal(n, 3);
    assert_int_equal(r[0].status, 200);
    assert_int_equal(r[1].status, 422); /* {} has no state: the decide layer's refusal, not a framing one */
    assert_int_equal(r[2].status, 200);
    assert_non_null(strstr(r[2].head, "application/json"));
    assert_false(closed);
    free(buf);
    /* a chunked body with an extension and a trailer, then the next request */
    n = pipeline("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "1;ext=\"v\"\r\n{\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n"
                 "GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
                 r, 2, false, &closed, &buf);
    assert_int_equal(n, 2);
    assert_int_equal(r[0].status, 422);
    assert_int_equal(r[1].status, 200);
    assert_false(closed);
    free(buf);
    /* identical Content-Length values are one value (RFC 9112 §6.3); empty lines before a request
     * line are ignored (§2.2); an absolute-form target is routed by its path (§3.2.2) */
    n = pipeline("POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2, 2\r\n\r\n{}"
                 "\r\n\r\nGET http://example.com/health?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n",
                 r, 2, false, &closed, &buf);
    assert_int_equal(n, 2);
    assert_int_equal(r[0].status, 422);
    assert_int_equal(r[1].status, 200);
    free(buf);
    /* HEAD: the length of the body it would have, no body */
    n = pipeline("HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n", r, 1, true, &closed, &buf);
    assert_int_equal(n, 1);
    assert_int_equal(r[0].status, 200);
    assert_non_null(strstr(r[0].head, "Content-Length: 15\r\n"));
    assert_false(closed);
    free(buf);
}

static void test_http10_and_close(void **state) {
    (void)state;
    /* HTTP/1.0 closes unless it asks for keep-alive; Connection: close closes */
    const char *const reqs[] = {"GET /health HTTP/1.0\r\n\r\n",
                                "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"};
    for (int i = 0; i < 2; i++) {
        struct raw raw = exchange(reqs[i], strlen(reqs[i]));
        struct resp r[2];
        size_t used;
        assert_int_equal(split(raw.buf, raw.len, r, 2, false, &used), 1);
        assert_int_equal(r[0].status, 200);
        assert_true(raw.closed);
        char v[32];
        field(&r[0], "Connection", v, sizeof v);
        assert_true(strcasecmp(v, "close") == 0);
        free(raw.buf);
    }
    struct resp r[8];
    bool closed;
    char *buf;
    int n = pipeline("GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", r, 1, false, &closed, &buf);
    assert_int_equal(n, 1);
    char v[32];
    field(&r[0], "Connection", v, sizeof v);
    assert_true(strcasecmp(v, "keep-alive") == 0);
    assert_false(closed);
    free(buf);
}

/* Expect: 100-continue: the interim response, then the body, then the answer. */
static void test_expect_continue(void **state) {
    (void)state;
    int fd = dial();
    const char *head = "POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n";
    put(fd, head, strlen(head));
    struct raw a = slurp(fd, "\r\n\r\n");
    assert_string_equal(a.buf, "HTTP/1.1 100 Continue\r\n\r\n");
    put(fd, "{}", 2);
    struct raw b = slurp(fd, "}}");
    assert_true(strncmp(b.buf, "HTTP/1.1 422 ", 13) == 0);
    free(a.buf);
    free(b.buf);
    close(fd);
}

/* ---- the body limit ---- */

/* A declared length over the limit is refused on the head, at once: the client sent 10 bytes of a
 * billion, and the 413 comes without the server waiting for the rest (it would wait for its idle
 * timeout, 30 s, past WAIT_MS). */
static void test_declared_length_over_the_limit(void **state) {
    (void)state;
    static const char req[] = "POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n{\"state\":";
    double t0 = jev_now_ms();
    expect_refusal("Content-Length: 1000000000", req, sizeof req - 1, 413, BIG);
    assert_true(jev_now_ms() - t0 < WAIT_MS);
}

/* A chunked body of exactly the limit is a request (answered 200), one byte more is 413 (a
 * one-byte overrun of the buffer would be a heap overflow under ASan), in any chunking. */
static void test_chunked_body_limit(void **state) {
    (void)state;
    enum { LIMIT = 333 };
    struct jev_server_params p = jev_server_default_params();
    p.port = 0;
    p.max_body_bytes = LIMIT;
    struct jev_server *s = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_server_start(model, decider, &p, &s, &err), JEV_OK);
    int saved = port;
    port = jev_server_port(s);
    static const char json[] =
        "{\"state\":\"a red door\",\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"Is it red?\"}}}";
    for (int extra = 0; extra < 2; extra++) {
        size_t n = LIMIT + (size_t)extra;
        char body[LIMIT + 2];
        memset(body, ' ', n); /* the JSON, then spaces up to the length */
        memcpy(body, json, sizeof json - 1);
        static const size_t pieces[] = {LIMIT + 1, 7, 1};
        for (size_t k = 0; k < sizeof pieces / sizeof pieces[0]; k++) {
            char req[4096];
            int len = snprintf(req, sizeof req,
                               "POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                               "Connection: close\r\n\r\n");
            for (size_t at = 0; at < n; at += pieces[k]) {
                size_t c = n - at < pieces[k] ? n - at : pieces[k];
                len += snprintf(req + len, sizeof req - (size_t)len, "%zx\r\n%.*s\r\n", c, (int)c, body + at);
            }
            len += snprintf(req + len, sizeof req - (size_t)len, "0\r\n\r\n");
            if (extra) {
                expect_refusal("a chunked body one byte over the limit", req, (size_t)len, 413, BIG);
                continue;
            }
            struct raw raw = exchange(req, (size_t)len);
            if (strncmp(raw.buf, "HTTP/1.1 200 ", 13) != 0)
                fail_msg("a chunked body of exactly the limit in pieces of %zu: %s", pieces[k], raw.buf);
            free(raw.buf);
        }
    }
    port = saved;
    jev_server_stop(s);
}

/* With a key, the Authorization field must come once: a second one (a proxy that adds its own, a
 * client that sends two) is refused like a wrong key, whichever of them is right. */
static void test_authorization_once(void **state) {
    (void)state;
    struct jev_server_params p = jev_server_default_params();
    p.port = 0;
    p.api_key = "k";
    struct jev_server *s = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_server_start(model, decider, &p, &s, &err), JEV_OK);
    int saved = port;
    port = jev_server_port(s);
    static const char one[] =
        "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nConnection: close\r\n\r\n";
    struct raw r = exchange(one, sizeof one - 1);
    assert_true(strncmp(r.buf, "HTTP/1.1 200 ", 13) == 0);
    free(r.buf);
    REFUSE("GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nAuthorization: Bearer x\r\n"
           "Connection: close\r\n\r\n",
           401, "authentication_error");
    REFUSE("GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer x\r\nAuthorization: Bearer k\r\n"
           "Connection: close\r\n\r\n",
           401, "authentication_error");
    port = saved;
    jev_server_stop(s);
}

/* ---- the parser alone ---- */

/* A head fed a byte at a time ends where it ends whole, and parses the same. */
static void test_scan_byte_at_a_time(void **state) {
    (void)state;
    const char *h = "\r\nPOST /v1/x?y HTTP/1.1\r\nHost:  h \r\nContent-Length: 7\r\nX:\r\n\r\nbody...";
    size_t n = strlen(h);
    struct http_scan whole = {0}, inc = {0};
    struct http_refusal r = {0};
    long end = http_scan_head(&whole, h, n, &r);
    assert_true(end > 0);
    long got = 0;
    for (size_t i = 1; i <= n && got == 0; i++)
        got = http_scan_head(&inc, h, i, &r);
    assert_int_equal(got, end);
    assert_int_equal(inc.skip, 2);
    struct http_head hd;
    assert_true(http_head_parse(h + inc.skip, (size_t)end - inc.skip, &hd, &r));
    assert_string_equal(hd.method, "POST");
    assert_string_equal(hd.path, "/v1/x");
    assert_string_equal(http_head_field(&hd, "host", NULL), "h");
    assert_string_equal(http_head_field(&hd, "X", NULL), "");
    assert_int_equal(hd.framing, HTTP_BODY_LENGTH);
    assert_int_equal(hd.length, 7);
    assert_true(hd.keep_alive);
    http_head_free(&hd);
}

/* A chunked body decoded a byte at a time gives the bytes it gives whole, and ends at the same place. */
static void test_chunked_byte_at_a_time(void **state) {
    (void)state;
    const char *body = "4;a=b\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nT: v\r\n\r\nNEXT";
    size_t n = strlen(body);
    struct http_head h = {.framing = HTTP_BODY_CHUNKED};
    for (int mode = 0; mode < 2; mode++) {
        struct http_body b;
        http_body_init(&b, &h);
        char out[64] = {0};
        size_t out_n = 0, at = 0, avail = mode ? 0 : n;
        int rc = 0;
        while (rc == 0) {
            if (at == avail) { /* all given is consumed: the next byte arrives (none left: truncated) */
                assert_true(avail < n);
                avail++;
            }
            struct http_refusal r = {0};
            size_t used = 0, dn = 0;
            const char *d = NULL;
            rc = http_body_step(&b, body + at, avail - at, &used, &d, &dn, &r);
            assert_true(rc >= 0);
            assert_true(out_n + dn < sizeof out);
            if (dn)
                memcpy(out + out_n, d, dn);
            out_n += dn;
            at += used;
        }
        assert_int_equal(rc, 1);
        assert_string_equal(out, "Wikipedia in\r\n\r\nchunks.");
        assert_string_equal(body + at, "NEXT");
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_content_length_refusals),
        cmocka_unit_test(test_transfer_encoding_refusals),
        cmocka_unit_test(test_head_refusals),
        cmocka_unit_test(test_keep_alive_and_pipelining),
        cmocka_unit_test(test_http10_and_close),
        cmocka_unit_test(test_expect_continue),
        cmocka_unit_test(test_declared_length_over_the_limit),
        cmocka_unit_test(test_chunked_body_limit),
        cmocka_unit_test(test_authorization_once),
        cmocka_unit_test(test_scan_byte_at_a_time),
        cmocka_unit_test(test_chunked_byte_at_a_time),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
