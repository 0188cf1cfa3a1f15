/*
 * fuzz-http.c - raw bytes as an HTTP client's through `jev serve`'s whole
 * request path: the server (jev_server_start, its connection loop, the
 * parser, routes, limits and the decider of the tiny synthetic model, once
 * per process on a loopback port) gets each input on a fresh connection,
 * then the write side is shut and the reply read until the server closes.
 *
 * It must never crash, leak or hang (no close within 10 s aborts), and its
 * reply must be well formed: nothing but complete responses, each a status
 * line, Content-Length matching the body, and, but for 100 Continue, a JSON
 * body with Content-Type application/json and a request id (the malformed
 * and HTML answers the server's former library gave fail here).
 *
 * The parser alone too (http-int.h): the end of a head found a byte at a
 * time must be where it is found whole, and a body decoded a byte at a time
 * must give the same bytes and end as decoded whole.
 */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/timing.h"        // defines: jev_now_ms
#include "common/synth/synth.h" // defines: jev_synth_write
#include "jev.h"                // defines: jev_model_load, jev_engine_init, jev_decider_open
#include "server/http-int.h"    // defines: http_scan_head, http_head_parse, http_body_step
#include "server/server.h"      // defines: jev_server_start

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MODEL_DIR "build-fuzz/http-tiny-hf"
#define WAIT_MS 10000.0

static struct jev_server *g_server;
static int g_port;

static void setup(void) {
    if (g_server)
        return;
    struct jev_error err = {0};
    struct stat sb;
    if (stat(MODEL_DIR "/config.json", &sb) != 0) {
        mkdir("build-fuzz", 0755);
        struct jev_synth_params sp = jev_synth_default_params();
        sp.config_path = "configs/tiny.json";
        sp.seed = 1;
        sp.layout = JEV_SYNTH_HF;
        sp.out_dir = MODEL_DIR;
        sp.force = true;
        struct jev_synth_report rep;
        if (jev_synth_write(&sp, &rep, &err) != JEV_OK) {
            fprintf(stderr, "fuzz-http: synth: %s (run from the repository root)\n", err.msg);
            abort();
        }
    }
    struct jev_model_params mp = jev_model_default_params();
    mp.n_threads = 1;
    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_batch = 8;
    ep.max_tokens = 1024;
    struct jev_model *model = NULL;
    struct jev_engine *engine = NULL;
    struct jev_decider *decider = NULL;
    char msg[512];
    if (jev_model_load(MODEL_DIR, &mp, &model, msg, sizeof msg) != JEV_OK ||
        jev_engine_init(model, &ep, &engine) != JEV_OK || jev_decider_open(model, engine, &decider) != JEV_OK) {
        fprintf(stderr, "fuzz-http: set-up failed\n");
        abort();
    }
    struct jev_server_params p = jev_server_default_params();
    p.port = 0;
    p.max_body_bytes = 16 << 10; /* inputs reach the body limit */
    p.http_threads = 2;
    p.idle_timeout_s = 5;
    if (jev_server_start(model, decider, &p, &g_server, &err) != JEV_OK) {
        fprintf(stderr, "fuzz-http: start: %s\n", err.msg);
        abort();
    }
    g_port = jev_server_port(g_server);
}

/* ---- the parser, whole and a byte at a time ---- */

static void parser_agrees(const char *in, size_t n) {
    struct http_scan whole = {0}, inc = {0};
    struct http_refusal r1 = {0}, r2 = {0};
    long end = http_scan_head(&whole, in, n, &r1), got = 0;
    for (size_t i = 1; i <= n && got == 0; i++)
        got = http_scan_head(&inc, in, i, &r2);
    if (got != end || (end < 0 && r1.status != r2.status)) {
        fprintf(stderr, "fuzz-http: head end %ld whole, %ld a byte at a time\n", end, got);
        abort();
    }
    if (end <= 0)
        return;
    struct http_head h;
    if (!http_head_parse(in + whole.skip, (size_t)end - whole.skip, &h, &r1))
        return;
    if (h.framing == HTTP_BODY_NONE) {
        http_head_free(&h);
        return;
    }
    const char *body = in + end;
    size_t blen = n - (size_t)end;
    uint8_t sum[2][2] = {{0}};
    size_t total[2] = {0}, stop[2] = {0};
    int rc[2] = {0};
    for (int mode = 0; mode < 2; mode++) {
        struct http_body b;
        http_body_init(&b, &h);
        size_t at = 0, avail = mode ? 0 : blen;
        for (;;) {
            if (at == avail) {
                if (avail == blen)
                    break;
                avail = mode ? avail + 1 : blen;
            }
            struct http_refusal r = {0};
            size_t used = 0, dn = 0;
            const char *d = NULL;
            rc[mode] = http_body_step(&b, body + at, avail - at, &used, &d, &dn, &r);
            for (size_t i = 0; i < dn; i++) { /* a running checksum of the body bytes */
                sum[mode][0] = (uint8_t)(sum[mode][0] + (uint8_t)d[i]);
                sum[mode][1] = (uint8_t)(sum[mode][1] + sum[mode][0]);
            }
            total[mode] += dn;
            at += used;
            if (rc[mode] != 0)
                break;
        }
        stop[mode] = at;
    }
    if (rc[0] != rc[1] || total[0] != total[1] || memcmp(sum[0], sum[1], 2) != 0 ||
        (rc[0] == 1 && stop[0] != stop[1])) {
        fprintf(stderr,
                "fuzz-http: body whole: rc %d, %zu bytes, end %zu; a byte at a time: rc %d, %zu bytes, end %zu\n",
                rc[0], total[0], stop[0], rc[1], total[1], stop[1]);
        abort();
    }
    http_head_free(&h);
}

/* ---- the server ---- */

static void bad_reply(const char *why, const char *reply, size_t len) {
    fprintf(stderr, "fuzz-http: malformed reply (%s):\n%.*s\n", why, (int)(len > 4000 ? 4000 : len), reply);
    abort();
}

/* Every response in the reply: a status line, its fields, Content-Length bytes of JSON. */
static void check_reply(const char *reply, size_t len) {
    size_t at = 0;
    while (at < len) {
        const char *h = reply + at;
        const char *end = memmem(h, len - at, "\r\n\r\n", 4);
        if (len - at < 13 || memcmp(h, "HTTP/1.1 ", 9) != 0 || !end)
            bad_reply("not a status line and fields", reply, len);
        int status = atoi(h + 9);
        size_t hl = (size_t)(end - h) + 4;
        char *head = strndup(h, hl);
        if (status == 100) {
            if (strcmp(head, "HTTP/1.1 100 Continue\r\n\r\n") != 0)
                bad_reply("100 Continue with fields", reply, len);
            free(head);
            at += hl;
            continue;
        }
        const char *cl = strcasestr(head, "\r\nContent-Length: ");
        if (status < 200 || status > 599 || !cl || !strcasestr(head, "\r\nContent-Type: application/json\r\n") ||
            !strcasestr(head, "\r\nx-typesafe-request-id: req_"))
            bad_reply("a status or a field every response carries", reply, len);
        size_t blen = strtoul(cl + 18, NULL, 10);
        free(head);
        /* a HEAD answer has no body (every body is a JSON object): the next response or the end follows */
        bool no_body = at + hl == len || h[hl] != '{';
        if (!no_body) {
            if (len - at - hl < blen)
                bad_reply("a body shorter than its Content-Length", reply, len);
            json_error_t e;
            json_t *j = json_loadb(h + hl, blen, 0, &e);
            if (!j)
                bad_reply("a body that is not JSON", reply, len);
            json_decref(j);
            at += blen;
        }
        at += hl;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    parser_agrees((const char *)data, size);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("fuzz-http: connect");
        abort();
    }
    for (size_t at = 0; at < size;) {
        ssize_t k = send(fd, data + at, size - at, MSG_NOSIGNAL);
        if (k <= 0)
            break; /* the server closed early (a refusal): its reply is what counts */
        at += (size_t)k;
    }
    shutdown(fd, SHUT_WR);
    char *reply = NULL;
    size_t len = 0;
    double deadline = jev_now_ms() + WAIT_MS;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left = (int)(deadline - jev_now_ms());
        if (left <= 0 || poll(&p, 1, left) <= 0) {
            fprintf(stderr, "fuzz-http: the server did not close within %.0f ms\n", WAIT_MS);
            abort();
        }
        char buf[65536];
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k <= 0)
            break;
        char *grown = realloc(reply, len + (size_t)k + 1);
        if (!grown)
            abort();
        reply = grown;
        memcpy(reply + len, buf, (size_t)k);
        len += (size_t)k;
        reply[len] = '\0';
    }
    close(fd);
    check_reply(reply ? reply : "", len);
    free(reply);
    return 0;
}
