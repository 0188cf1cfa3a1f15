/*
 * server.c - the HTTP side of server.h: the per-request state (body buffer,
 * request id, timing), routing, authentication, the body limit, parsing and
 * validating a decision and admitting it to the scheduler (scheduler.c), and
 * the routes that never touch the model (/health, /ready, /metrics,
 * /v1/models), over the server's own HTTP/1.1 (http-int.h).
 *
 * The connection loop calls the handler once with a request's head (we route,
 * authenticate and check Content-Length there, so a refused request is
 * answered before its body is read), once per piece of body (appended; past
 * the limit the answer is 413 at once), and once more when the body is
 * complete: then a decision is parsed and validated here, on the HTTP thread,
 * and either refused at once (400/413/422/501, 429 when the queue is full,
 * 503 while draining) or deferred to the scheduler, whose answer comes back
 * through http_complete. Bytes that are not HTTP come to refused(), and their
 * answer is the same JSON error body with a request id as every other.
 *
 * What it is not: HTTP framing (http-parse.c, http-loop.c), running
 * decisions (scheduler.c), the request format (wire/request.h), the answers
 * (wire/route.h), the error body (wire/response.h), the metrics (metrics.c).
 */
#include "server/server.h" // defines: struct jev_server_params, jev_server_start

#include "base/buf.h"      // defines: struct jev_buf, jev_buf_*
#include "base/log.h"      // defines: jev_log
#include "base/timing.h"   // defines: jev_now_ms
#include "http-int.h"      // defines: http_loop_start, http_respond, http_defer, struct http_exchange
#include "io/jsonw.h"      // defines: struct jev_jsonw
#include "model/model.h"   // defines: struct jev_model (dir, params)
#include "server-int.h"    // defines: struct jev_server, struct job, sched_admit, metrics_answer
#include "wire/request.h"  // defines: jev_request_parse_systemone, jev_request_parse_openai
#include "wire/response.h" // defines: jev_response_error, jev_response_request_error

#include "decide/pipeline.h" // defines: jev_decider_engine (the engine's precision for /v1/models)

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>

/* One request's state, from its head to its completion callback. */
struct request {
    enum route route;    /* what the path names */
    double start_ms;     /* when the head arrived */
    char id[40];         /* x-typesafe-request-id */
    char method[16];     /* for the log line */
    char path[128];      /* for the log line (truncated) */
    struct jev_buf body; /* received body, capped at the server's max_body */
    bool too_large;      /* the body passed the limit: the answer is 413 */
    bool answered;       /* a response was queued */
    size_t dropped;      /* body bytes of a route that takes none, counted against the limit */
};

struct jev_server_params jev_server_default_params(void) {
    struct jev_server_params p = {
        .host = "127.0.0.1",
        .port = 8080,
        .api_key = NULL,
        .max_body_bytes = JEV_SERVER_MAX_BODY_DEFAULT,
        .max_queue = 64,
        .max_running = 32,
        .max_batch = 0,
        .http_threads = 4,
        .idle_timeout_s = 60,
        .read_timeout_s = 30,
        .max_connections = 0,
    };
    return p;
}

/* ---- responses ---- */

/* Used when even the error body cannot be allocated. */
static const char oom_body[] =
    "{\"error\":{\"message\":\"server: out of memory\",\"type\":\"server_error\",\"code\":500}}";

static void next_id(struct jev_server *s, char *out, size_t size) {
    snprintf(out, size, "req_%08x%012llx", s->id_prefix, (unsigned long long)atomic_fetch_add(&s->next_id, 1));
}

void server_answer(struct jev_server *s, struct http_exchange *x, enum route route, const char *id, const char *method,
                   const char *path, double start_ms, unsigned status, char *body, const char *name, const char *value,
                   const char *note) {
    (void)s;
    const char *b = body;
    if (!b) {
        b = oom_body;
        status = 500;
        name = NULL;
    }
    const char *headers[] = {"Content-Type", "application/json", "x-typesafe-request-id", id, name, value, NULL};
    http_respond(x, status, headers, b, strlen(b));
    free(body);
    double ms = jev_now_ms() - start_ms;
    metrics_answer(&s->metrics, route, status, ms);
    jev_log(JEV_LOG_INFO, "%s %s %u %.1f ms %s%s", method, path, status, ms, id, note ? note : "");
}

char *server_error_body(unsigned status, const char *type, const char *message) {
    return jev_response_error((int)status, type, message);
}

static void respond(struct http_exchange *x, struct jev_server *s, struct request *rq, unsigned status, char *body,
                    const char *name, const char *value) {
    server_answer(s, x, rq->route, rq->id, rq->method, rq->path, rq->start_ms, status, body, name, value, NULL);
    rq->answered = true;
}

static void respond_error(struct http_exchange *x, struct jev_server *s, struct request *rq, unsigned status,
                          const char *type, const char *message, const char *name, const char *value) {
    respond(x, s, rq, status, server_error_body(status, type, message), name, value);
}

/* {"models":[{"name","description","release_date","precision"}]} (spec §1, TypeSafe's form) plus OpenAI's
 * {"object":"list","data":[{"id","object","owned_by","precision"}]} so both kinds of client find the name;
 * "precision" is the engine's mode (jev.h, enum jev_precision), set once by --precision. */
static char *models_body(const struct jev_server *s) {
    const char *mode = jev_precision_name(jev_decider_engine(s->decider)->params.precision);
    char desc[512];
    snprintf(desc, sizeof desc, "%s served by jev %s (typed decisions: noul, choice, score; %s precision)",
             s->model_name, jev_version(), mode);
    struct jev_jsonw w;
    jev_jsonw_init(&w);
    jev_jsonw_raw(&w, "{\"models\":[{\"name\":");
    jev_jsonw_str(&w, s->model_name);
    jev_jsonw_raw(&w, ",\"description\":");
    jev_jsonw_str(&w, desc);
    jev_jsonw_raw(&w, ",\"release_date\":null,\"precision\":");
    jev_jsonw_str(&w, mode);
    jev_jsonw_raw(&w, "}],\"object\":\"list\",\"data\":[{\"id\":");
    jev_jsonw_str(&w, s->model_name);
    jev_jsonw_raw(&w, ",\"object\":\"model\",\"owned_by\":\"jev\",\"precision\":");
    jev_jsonw_str(&w, mode);
    jev_jsonw_raw(&w, "}]}");
    return jev_jsonw_finish(&w);
}

/* ---- checks ---- */

static enum route route_of(const char *path) {
    if (!strcmp(path, "/v1/systemone"))
        return ROUTE_SYSTEMONE;
    if (!strcmp(path, "/v1/decisions"))
        return ROUTE_DECISIONS;
    if (!strcmp(path, "/v1/models"))
        return ROUTE_MODELS;
    if (!strcmp(path, "/health"))
        return ROUTE_HEALTH;
    if (!strcmp(path, "/ready"))
        return ROUTE_READY;
    if (!strcmp(path, "/metrics"))
        return ROUTE_METRICS;
    return ROUTE_NONE;
}

static bool route_is_post(enum route r) { return r == ROUTE_SYSTEMONE || r == ROUTE_DECISIONS; }

/* The bearer token against the key in time that depends on the key's length only, so the
 * response time does not tell how many leading bytes were right. */
static bool key_matches(const struct jev_server *s, const char *header) {
    if (!header || strncasecmp(header, "Bearer ", 7) != 0)
        return false;
    const char *tok = header + 7;
    while (*tok == ' ')
        tok++;
    size_t n = strlen(tok);
    unsigned char diff = n != s->api_key_len;
    for (size_t i = 0; i < s->api_key_len; i++)
        diff |= (unsigned char)(s->api_key[i] ^ (i < n ? tok[i] : 0));
    return diff == 0;
}

/* Appends a piece of body, or marks the request too large once the total passes the limit (the
 * buffer's cap is max_body: a body of exactly the limit fits). false only when an allocation fails. */
static bool body_append(const struct jev_server *s, struct request *rq, const char *data, size_t n) {
    (void)s;
    if (rq->too_large || n > jev_buf_room(&rq->body)) {
        rq->too_large = true;
        return true;
    }
    return jev_buf_add(&rq->body, data, n, NULL) == JEV_OK;
}

/* ---- decisions ---- */

/*
 * Parsed and validated here, on the HTTP thread (spec §6.2: validation precedes the load gate, so a
 * broken request gets its own 400/413/422/501 rather than an invitation to retry), then admitted
 * to the scheduler with the answer deferred, or refused: 429 with Retry-After when the queue is
 * full, 503 with Retry-After while the server drains.
 */
static void decide(struct http_exchange *x, struct jev_server *s, struct request *rq) {
    struct job *j = calloc(1, sizeof *j);
    if (!j) {
        respond(x, s, rq, 500, NULL, NULL, NULL);
        return;
    }
    struct jev_request_error rerr = {0};
    struct jev_request_opts opts = {.no_vision = !jev_decider_has_vision(s->decider)};
    const char *b = jev_buf_str(&rq->body);
    j->shape = rq->route == ROUTE_DECISIONS ? JEV_SHAPE_OPENAI : JEV_SHAPE_SYSTEMONE;
    enum jev_status st = j->shape == JEV_SHAPE_OPENAI
                             ? jev_request_parse_openai(b, rq->body.len, &opts, &j->r, &rerr)
                             : jev_request_parse_systemone(b, rq->body.len, &opts, &j->r, &rerr);
    if (st != JEV_OK) { /* the same body and status as jev_decide_json's refusal */
        free(j);
        respond(x, s, rq, rerr.http_status ? (unsigned)rerr.http_status : 500, jev_response_request_error(&rerr), NULL,
                NULL);
        return;
    }
    j->route = rq->route;
    j->start_ms = rq->start_ms;
    memcpy(j->id, rq->id, sizeof j->id);
    memcpy(j->method, rq->method, sizeof j->method);
    memcpy(j->path, rq->path, sizeof j->path);
    /* the answer comes later, from the scheduler (or from sched_admit's refusal: 429, 503) */
    if (!(j->ticket = http_defer(x))) {
        job_free(j);
        respond(x, s, rq, 500, NULL, NULL, NULL);
        return;
    }
    rq->answered = true;
    if (sched_admit(s, j) != 0)
        job_free(j);
}

/* 200 {"status":"ok"} while the decider can answer; 503 {"status":"unavailable","error":...} once
 * its device failed for good, so that a load balancer's probe takes this replica out, and 503
 * {"status":"draining"} once the server stops admitting. Answered here, never behind a decision. */
static void health(struct http_exchange *x, struct jev_server *s, struct request *rq, bool ready) {
    char why[512];
    bool lost = jev_decider_status(s->decider, why, sizeof why) != JEV_OK;
    bool draining = atomic_load(&s->draining);
    int32_t queued = 0, running = 0;
    sched_counts(s, &queued, &running);
    bool full = queued + running >= s->p.max_queue + s->p.max_running;
    struct jev_jsonw w;
    jev_jsonw_init(&w);
    const char *status = lost ? "unavailable" : draining ? "draining" : !ready ? "ok" : full ? "full" : "ready";
    jev_jsonw_raw(&w, "{\"status\":");
    jev_jsonw_str(&w, status);
    if (ready) { /* the readiness form: how loaded this replica is */
        char nums[200];
        snprintf(nums, sizeof nums, ",\"queued\":%d,\"running\":%d,\"max_queue\":%d,\"max_running\":%d", queued,
                 running, s->p.max_queue, s->p.max_running);
        jev_jsonw_raw(&w, nums);
    }
    if (lost) {
        jev_jsonw_utf8_fix(why); /* the message may quote bytes from outside */
        jev_jsonw_raw(&w, ",\"error\":");
        jev_jsonw_str(&w, why);
    }
    jev_jsonw_raw(&w, "}");
    bool ok = !lost && !draining && !(ready && full);
    respond(x, s, rq, ok ? 200 : 503, jev_jsonw_finish(&w), ok ? NULL : "Retry-After", ok ? NULL : "1");
}

/* The Prometheus text format (not JSON: the one response that is not). */
static void metrics(struct http_exchange *x, struct jev_server *s, struct request *rq) {
    int32_t queued = 0, running = 0;
    sched_counts(s, &queued, &running);
    char *text = metrics_text(&s->metrics, queued, running, http_loop_connections(s->loop), s->p.max_queue,
                              atomic_load(&s->draining));
    if (!text) {
        respond(x, s, rq, 500, NULL, NULL, NULL);
        return;
    }
    const char *headers[] = {"Content-Type", "text/plain; version=0.0.4; charset=utf-8", "x-typesafe-request-id",
                             rq->id, NULL};
    http_respond(x, 200, headers, text, strlen(text));
    free(text);
    rq->answered = true;
    metrics_answer(&s->metrics, rq->route, 200, jev_now_ms() - rq->start_ms);
}

/* ---- the handler (http-int.h) ---- */

/* A request's state; NULL when even that cannot be allocated (then it is answered 500 at once). */
static struct request *request_new(struct jev_server *s, struct http_exchange *x, const char *method,
                                   const char *path) {
    struct request *rq = calloc(1, sizeof *rq);
    if (!rq) {
        char id[40];
        next_id(s, id, sizeof id);
        const char *headers[] = {"Content-Type", "application/json", "x-typesafe-request-id", id, NULL};
        http_respond(x, 500, headers, oom_body, sizeof oom_body - 1);
        return NULL;
    }
    rq->start_ms = jev_now_ms();
    jev_buf_init(&rq->body, s->max_body);
    next_id(s, rq->id, sizeof rq->id);
    snprintf(rq->method, sizeof rq->method, "%s", method);
    snprintf(rq->path, sizeof rq->path, "%s", path);
    x->user = rq;
    return rq;
}

static void too_large(struct http_exchange *x, struct jev_server *s, struct request *rq) {
    char msg[200];
    snprintf(msg, sizeof msg, "server: the body is over the limit of %zu bytes (--max-body)", s->max_body);
    respond_error(x, s, rq, 413, "request_too_large_error", msg, NULL, NULL);
}

/* The head: state, route, method, key and declared size. Answers only a refusal. */
static void on_head(void *ctx, struct http_exchange *x) {
    struct jev_server *s = ctx;
    const struct http_head *h = x->head;
    struct request *rq = request_new(s, x, h->method, h->path);
    if (!rq)
        return;
    rq->route = route_of(h->path);
    if (rq->route == ROUTE_NONE) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "server: no route %.100s (routes: POST /v1/systemone, POST /v1/decisions, "
                 "GET /v1/models, GET /health, GET /ready, GET /metrics)",
                 h->path);
        respond_error(x, s, rq, 404, "not_found_error", msg, NULL, NULL);
        return;
    }
    bool post = route_is_post(rq->route);
    bool ok = post ? !strcmp(h->method, "POST") : !strcmp(h->method, "GET") || !strcmp(h->method, "HEAD");
    if (!ok) {
        const char *allow = post ? "POST" : "GET, HEAD";
        char msg[200];
        snprintf(msg, sizeof msg, "server: %.100s takes %s, not %.20s", h->path, allow, h->method);
        respond_error(x, s, rq, 405, "invalid_request_error", msg, "Allow", allow);
        return;
    }
    /* /health, /ready and /metrics stay open so that a load balancer and a metrics scraper can probe
     * without the key; a second Authorization field is refused like a wrong one */
    int n_auth = 0;
    const char *auth = http_head_field(h, "Authorization", &n_auth);
    bool open_route = rq->route == ROUTE_HEALTH || rq->route == ROUTE_READY || rq->route == ROUTE_METRICS;
    if (s->api_key && !open_route && (n_auth != 1 || !key_matches(s, auth))) {
        respond_error(x, s, rq, 401, "authentication_error",
                      "server: this server needs \"Authorization: Bearer <key>\" with its API key", NULL, NULL);
        return;
    }
    if (h->framing == HTTP_BODY_LENGTH && h->length > s->max_body) {
        char msg[200];
        if (h->length == UINT64_MAX)
            snprintf(msg, sizeof msg, "server: the body's Content-Length is over the limit of %zu bytes (--max-body)",
                     s->max_body);
        else
            snprintf(msg, sizeof msg, "server: the body has %llu bytes, over the limit of %zu (--max-body)",
                     (unsigned long long)h->length, s->max_body);
        respond_error(x, s, rq, 413, "request_too_large_error", msg, NULL, NULL);
    }
}

/* A piece of body: appended for the decision routes, counted and dropped for the others; past the
 * limit the answer is 413 at once (the connection then closes, the rest is not read). */
static void on_body(void *ctx, struct http_exchange *x, const char *data, size_t n) {
    struct jev_server *s = ctx;
    struct request *rq = x->user;
    if (!rq || rq->answered)
        return;
    if (!route_is_post(rq->route)) {
        rq->dropped += n;
        if (rq->dropped > s->max_body)
            too_large(x, s, rq);
        return;
    }
    if (!body_append(s, rq, data, n))
        respond(x, s, rq, 500, NULL, NULL, NULL);
    else if (rq->too_large)
        too_large(x, s, rq);
}

static void on_end(void *ctx, struct http_exchange *x) {
    struct jev_server *s = ctx;
    struct request *rq = x->user;
    if (!rq || rq->answered)
        return;
    switch (rq->route) {
    case ROUTE_HEALTH: health(x, s, rq, false); return;
    case ROUTE_READY: health(x, s, rq, true); return;
    case ROUTE_METRICS: metrics(x, s, rq); return;
    case ROUTE_MODELS: respond(x, s, rq, 200, models_body(s), NULL, NULL); return;
    default: break;
    }
    if (rq->too_large)
        too_large(x, s, rq);
    else
        decide(x, s, rq);
}

/* The HTTP layer refuses the bytes (malformed, too long, a version or coding not served). */
static void on_refused(void *ctx, struct http_exchange *x, const struct http_refusal *r) {
    struct jev_server *s = ctx;
    struct request *rq = x->user;
    if (!rq && !(rq = request_new(s, x, x->head ? x->head->method : "-", x->head ? x->head->path : "-")))
        return;
    if (rq->answered)
        return;
    const char *type = r->status == 413 || r->status == 414 || r->status == 431 ? "request_too_large_error"
                       : r->status == 501 || r->status == 505                   ? "not_supported_error"
                       : r->status == 503                                       ? "unavailable_error"
                       : r->status == 408                                       ? "request_timeout_error"
                                                                                : "invalid_request_error";
    respond_error(x, s, rq, (unsigned)r->status, type, r->message, r->retry_after ? "Retry-After" : NULL,
                  r->retry_after ? "1" : NULL);
}

static void on_done(void *ctx, struct http_exchange *x) {
    struct request *rq = x->user;
    if (rq) {
        jev_buf_free(&rq->body);
        free(rq);
        x->user = NULL;
    }
}

/* ---- lifecycle ---- */

/* host:port into s->addr; false with err set when host is not an address. Numeric addresses
 * only (and "localhost"): a bind address that needs DNS would make start wait on a resolver. */
static bool resolve(struct jev_server *s, const char *host, int32_t port, struct jev_error *err) {
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", (int)port);
    int rc = getaddrinfo(strcmp(host, "localhost") ? host : "127.0.0.1", service, &hints, &res);
    if (rc != 0 || !res) {
        jev_fail(err, JEV_ERR_INVALID_ARG, "server: host '%s' is not a numeric IPv4 or IPv6 address (%s)", host,
                 rc ? gai_strerror(rc) : "no address");
        return false;
    }
    memcpy(&s->addr, res->ai_addr, res->ai_addrlen);
    s->addr_len = res->ai_addrlen;
    freeaddrinfo(res);
    return true;
}

static const char *base_name(const char *dir, char *out, size_t size) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/')
        b--;
    snprintf(out, size, "%.*s", (int)(n - b), dir + b);
    return out;
}

/* Connections the server keeps open at most: below the descriptor limit, so that accepting never
 * runs out of descriptors the model or the logs need. */
static int32_t max_connections(void) {
    struct rlimit rl;
    rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    if (n == RLIM_INFINITY || n > 10064)
        n = 10064;
    return n > 128 ? (int32_t)(n - 64) : 64;
}

/* Stops the scheduler (what is not started is answered 503), then the loop, then frees. */
static void server_free(struct jev_server *s) {
    sched_stop(s);
    http_loop_stop(s->loop);
    jev_batcher_free(s->batcher);
    pthread_mutex_destroy(&s->engine_lock);
    pthread_mutex_destroy(&s->qlock);
    pthread_cond_destroy(&s->qcond);
    pthread_cond_destroy(&s->idle);
    free(s->api_key);
    free(s);
}

enum jev_status jev_server_start(struct jev_model *model, struct jev_decider *decider,
                                 const struct jev_server_params *params, struct jev_server **out,
                                 struct jev_error *err) {
    *out = NULL;
    struct jev_server_params p = params ? *params : jev_server_default_params();
    const char *host = p.host ? p.host : "127.0.0.1";
    if (!model || !decider)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "server: a model and a decider are required");
    if (p.port < 0 || p.port > 65535)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "server: port %d is not in 0..65535", p.port);
    _Static_assert(JEV_SERVER_MAX_BODY_DEFAULT == JEV_DECIDE_MAX_BODY_BYTES, "one body limit for both layers");
    if (p.max_body_bytes > JEV_DECIDE_MAX_BODY_BYTES)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "server: max_body_bytes %zu is above the decide layer's limit of %zu",
                        p.max_body_bytes, JEV_DECIDE_MAX_BODY_BYTES);
    if (p.max_queue < 0)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "server: max_queue %d is negative", p.max_queue);
    if (p.max_running < 0 || p.max_running > 4096)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "server: max_running %d is not in 0..4096", p.max_running);
    if (p.max_batch < 0)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "server: max_batch %d is negative", p.max_batch);
    if (p.prep_threads < 0 || p.prep_threads > 64)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "server: prep_threads %d is not in 0..64", p.prep_threads);
    if (p.http_threads < 0 || p.http_threads > 1024)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "server: http_threads %d is not in 0..1024", p.http_threads);
    if (p.idle_timeout_s < 0 || p.idle_timeout_s > 86400)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "server: idle_timeout_s %d is not in 0..86400", p.idle_timeout_s);
    if (p.read_timeout_s < 0 || p.read_timeout_s > 86400)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "server: read_timeout_s %d is not in 0..86400", p.read_timeout_s);
    if (p.max_connections < 0)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "server: max_connections %d is negative", p.max_connections);
    struct jev_server *s = calloc(1, sizeof *s);
    if (!s)
        return jev_fail(err, JEV_ERR_NOMEM, "server: out of memory");
    pthread_mutex_init(&s->engine_lock, NULL);
    pthread_mutex_init(&s->qlock, NULL);
    pthread_cond_init(&s->qcond, NULL);
    pthread_cond_init(&s->idle, NULL);
    s->model = model;
    s->decider = decider;
    if (p.max_running == 0)
        p.max_running = 32;
    if (p.max_connections == 0 || p.max_connections > max_connections())
        p.max_connections = max_connections();
    s->p = p;
    s->p.api_key = NULL;
    s->p.host = NULL;
    s->max_body = p.max_body_bytes ? p.max_body_bytes : JEV_SERVER_MAX_BODY_DEFAULT;
    base_name(model->dir, s->model_name, sizeof s->model_name);
    if (getrandom(&s->id_prefix, sizeof s->id_prefix, 0) != (ssize_t)sizeof s->id_prefix)
        s->id_prefix = (uint32_t)(jev_now_ms() * 1000.0); /* uniqueness within the process still holds */
    if (p.api_key && p.api_key[0]) {
        s->api_key = strdup(p.api_key);
        if (!s->api_key) {
            server_free(s);
            return jev_fail(err, JEV_ERR_NOMEM, "server: out of memory");
        }
        s->api_key_len = strlen(s->api_key);
    }
    if (!resolve(s, host, p.port, err)) {
        server_free(s);
        return err->status;
    }
    struct jev_batch_params bp = {.max_rows = p.max_batch,
                                  .max_running = p.max_running,
                                  .prep_threads = p.prep_threads,
                                  .wake = sched_wake,
                                  .wake_ctx = s};
    if (jev_batcher_new(decider, &bp, &s->batcher, err) != JEV_OK || sched_start(s, err) != JEV_OK) {
        server_free(s);
        return err->status;
    }
    struct http_loop_params lp = {
        .addr = s->addr,
        .addr_len = s->addr_len,
        .threads = p.http_threads ? p.http_threads : 4,
        .idle_timeout_s = p.idle_timeout_s,
        .read_timeout_s = p.read_timeout_s,
        .max_connections = p.max_connections,
        .handler = {.ctx = s, .head = on_head, .body = on_body, .end = on_end, .refused = on_refused, .done = on_done},
    };
    char why[256];
    if (http_loop_start(&lp, &s->loop, why, sizeof why) != 0) {
        jev_fail(err, JEV_ERR_IO, "server: cannot listen on %s port %d: %s", host, p.port, why);
        server_free(s);
        return err->status;
    }
    s->port = http_loop_port(s->loop);
    *out = s;
    return JEV_OK;
}

int32_t jev_server_port(const struct jev_server *s) { return s->port; }

int32_t jev_server_queued(const struct jev_server *s) {
    int32_t q = 0, r = 0;
    sched_counts((struct jev_server *)(uintptr_t)s, &q, &r);
    return q + r;
}

void jev_server_lock(struct jev_server *s) { pthread_mutex_lock(&s->engine_lock); }
void jev_server_unlock(struct jev_server *s) { pthread_mutex_unlock(&s->engine_lock); }

void jev_server_stop(struct jev_server *s) {
    if (s)
        server_free(s);
}

enum jev_status jev_server_wait(struct jev_server *s, int stop_fd, int check_ms, unsigned char *stop_byte,
                                struct jev_error *err) {
    for (;;) {
        char why[512];
        if (jev_decider_status(s->decider, why, sizeof why) != JEV_OK)
            return jev_fail(err, JEV_ERR_DEVICE_LOST, "%s", why);
        struct pollfd p = {.fd = stop_fd, .events = POLLIN};
        int n = poll(&p, 1, check_ms > 0 ? check_ms : 1000);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return jev_fail(err, JEV_ERR_IO, "server: waiting for a stop request: %s", strerror(errno));
        if (n == 0)
            continue;
        ssize_t r = read(stop_fd, stop_byte, 1);
        if (r == 1)
            return JEV_OK;
        if (r < 0 && errno == EINTR)
            continue;
        return jev_fail(err, JEV_ERR_IO, "server: the stop request's pipe %s", r == 0 ? "closed" : strerror(errno));
    }
}

enum jev_status jev_server_drain(struct jev_server *s, int stop_fd, int wait_ms, unsigned char *stop_byte,
                                 struct jev_error *err) {
    atomic_store(&s->draining, true);
    http_loop_close_after_each(s->loop);
    double sent_by = -1; /* once every answer is computed: the most we wait for the sending */
    for (;;) {
        int32_t queued = 0, running = 0;
        sched_counts(s, &queued, &running);
        if (queued + running == 0) {
            if (sent_by < 0)
                sent_by = jev_now_ms() + (wait_ms > 0 ? wait_ms : 0);
            if (http_loop_pending(s->loop) == 0 || jev_now_ms() >= sent_by)
                return JEV_OK;
        }
        struct pollfd p = {.fd = stop_fd, .events = POLLIN};
        int n = poll(&p, stop_fd >= 0 ? 1 : 0, 20);
        if (n < 0 && errno != EINTR)
            return jev_fail(err, JEV_ERR_IO, "server: waiting for the drain: %s", strerror(errno));
        if (n > 0) {
            ssize_t r = read(stop_fd, stop_byte, 1);
            if (r == 1 || (r < 0 && errno != EINTR))
                return jev_fail(err, JEV_ERR_ABORTED, "server: stopped during the drain");
        }
    }
}
