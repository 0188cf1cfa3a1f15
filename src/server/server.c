/*
 * server.c - the libmicrohttpd daemon of server.h: binding, the per-request
 * state (body buffer, request id, timing), routing, authentication, the
 * body limit and the queue in front of the decider.
 *
 * libmicrohttpd calls the access handler several times per request: once
 * with the headers (we route, authenticate and check Content-Length there,
 * so a refused request is answered before its body is read), once per
 * piece of body (appended, or dropped once over the limit), and once more
 * with no data when the body is complete (we answer then).
 *
 * What it is not: the request format (wire/request.h), the answers
 * (wire/route.h), the error body (wire/response.h).
 */
#include "server/server.h" // defines: struct jev_server_params, jev_server_start

#include "base/buf.h"      // defines: struct jev_buf, jev_buf_*
#include "base/log.h"      // defines: jev_log
#include "base/timing.h"   // defines: jev_now_ms
#include "io/jsonw.h"      // defines: struct jev_jsonw
#include "model/model.h"   // defines: struct jev_model (dir, params)
#include "wire/request.h"  // defines: jev_request_parse_systemone, jev_request_parse_openai
#include "wire/response.h" // defines: jev_response_error, jev_response_request_error

#include <microhttpd.h>

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

struct jev_server {
    struct MHD_Daemon *daemon;    /* NULL until started */
    struct jev_model *model;      /* not owned */
    struct jev_decider *decider;  /* not owned; used under decide_lock only */
    pthread_mutex_t decide_lock;  /* one decision at a time */
    pthread_mutex_t log_lock;     /* start_msg */
    atomic_int admitted;          /* requests past the queue gate and not finished */
    atomic_ullong next_id;        /* request counter for the ids */
    uint32_t id_prefix;           /* random per server: ids stay unique across restarts */
    int32_t port;                 /* the bound port */
    int32_t max_queue;            /* params.max_queue */
    size_t max_body;              /* resolved params.max_body_bytes */
    char *api_key;                /* owned copy; NULL = no authentication */
    size_t api_key_len;           /* strlen(api_key) */
    char model_name[256];         /* the model directory's last component, as responses say it */
    bool starting;                /* MHD's messages go to start_msg while true */
    char start_msg[256];          /* MHD's first message during start (why a bind failed) */
    struct sockaddr_storage addr; /* the address bound */
};

enum route { ROUTE_NONE, ROUTE_SYSTEMONE, ROUTE_DECISIONS, ROUTE_MODELS, ROUTE_HEALTH };

/* One request's state, from its headers to its completion callback. */
struct request {
    enum route route;    /* what the path names */
    double start_ms;     /* when the headers arrived */
    char id[40];         /* x-typesafe-request-id */
    char method[16];     /* for the log line */
    char path[128];      /* for the log line (truncated) */
    struct jev_buf body; /* received body, capped at the server's max_body */
    bool too_large;      /* the body passed the limit: the rest is dropped, the answer is 413 */
    bool answered;       /* a response was queued */
};

struct jev_server_params jev_server_default_params(void) {
    struct jev_server_params p = {
        .host = "127.0.0.1",
        .port = 8080,
        .api_key = NULL,
        .max_body_bytes = JEV_SERVER_MAX_BODY_DEFAULT,
        .max_queue = 64,
        .http_threads = 4,
        .idle_timeout_s = 60,
    };
    return p;
}

/* ---- responses ---- */

/* Used when even the error body cannot be allocated. */
static const char oom_body[] =
    "{\"error\":{\"message\":\"server: out of memory\",\"type\":\"server_error\",\"code\":500}}";

/* Queues body (malloc'd, taken over; NULL = out of memory) with the headers every response
 * carries, plus one extra header when name is non-NULL, and writes the log line. */
static enum MHD_Result respond(struct MHD_Connection *c, struct request *rq, unsigned status, char *body,
                               const char *name, const char *value) {
    struct MHD_Response *resp = NULL;
    if (body)
        resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        status = 500;
        name = NULL;
        resp =
            MHD_create_response_from_buffer(sizeof oom_body - 1, (void *)(uintptr_t)oom_body, MHD_RESPMEM_PERSISTENT);
        if (!resp)
            return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, "x-typesafe-request-id", rq->id);
    if (name)
        MHD_add_response_header(resp, name, value);
    enum MHD_Result r = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    rq->answered = true;
    jev_log(JEV_LOG_INFO, "%s %s %u %.1f ms %s", rq->method, rq->path, status, jev_now_ms() - rq->start_ms, rq->id);
    return r;
}

static enum MHD_Result respond_error(struct MHD_Connection *c, struct request *rq, unsigned status, const char *type,
                                     const char *message, const char *name, const char *value) {
    return respond(c, rq, status, jev_response_error((int)status, type, message), name, value);
}

/* {"models":[{"name","description","release_date"}]} (spec §1, TypeSafe's form) plus OpenAI's
 * {"object":"list","data":[{"id","object","owned_by"}]} so both kinds of client find the name. */
static char *models_body(const struct jev_server *s) {
    char desc[512];
    snprintf(desc, sizeof desc, "%s served by jev %s (typed decisions: noul, choice, score)", s->model_name,
             jev_version());
    struct jev_jsonw w;
    jev_jsonw_init(&w);
    jev_jsonw_raw(&w, "{\"models\":[{\"name\":");
    jev_jsonw_str(&w, s->model_name);
    jev_jsonw_raw(&w, ",\"description\":");
    jev_jsonw_str(&w, desc);
    jev_jsonw_raw(&w, ",\"release_date\":null}],\"object\":\"list\",\"data\":[{\"id\":");
    jev_jsonw_str(&w, s->model_name);
    jev_jsonw_raw(&w, ",\"object\":\"model\",\"owned_by\":\"jev\"}]}");
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

/* Content-Length when the client sent a valid one; false for none (chunked) or garbage. */
static bool content_length(struct MHD_Connection *c, unsigned long long *out) {
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (!v || *v < '0' || *v > '9')
        return false;
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || *end)
        return false;
    *out = n;
    return true;
}

/* Appends a piece of body, or drops it once the total passes the limit (the buffer's cap is
 * max_body: a body of exactly the limit fits). false only when an allocation fails. */
static bool body_append(const struct jev_server *s, struct request *rq, const char *data, size_t n) {
    if (rq->too_large || n > jev_buf_room(&rq->body)) {
        rq->too_large = true;
        return true;
    }
    return jev_buf_add(&rq->body, data, n, NULL) == JEV_OK;
}

/* ---- decisions ---- */

/* The queue is full: the body is still validated first (spec §6.2: validation precedes the load
 * gate), so a broken request gets its own 400/413/422/501 rather than an invitation to retry. */
static enum MHD_Result refuse_busy(struct MHD_Connection *c, struct jev_server *s, struct request *rq) {
    struct jev_request r;
    struct jev_request_error rerr = {0};
    struct jev_request_opts opts = {.no_vision = s->model->params.no_vision};
    const char *b = jev_buf_str(&rq->body);
    enum jev_status st = rq->route == ROUTE_DECISIONS ? jev_request_parse_openai(b, rq->body.len, &opts, &r, &rerr)
                                                      : jev_request_parse_systemone(b, rq->body.len, &opts, &r, &rerr);
    if (st != JEV_OK)
        return respond(c, rq, rerr.http_status ? (unsigned)rerr.http_status : 500, jev_response_request_error(&rerr),
                       NULL, NULL);
    jev_request_free(&r);
    char msg[200];
    snprintf(msg, sizeof msg, "server: the decision queue is full (%d waiting, the --max-queue limit); retry later",
             s->max_queue);
    return respond_error(c, rq, 429, "rate_limit_error", msg, MHD_HTTP_HEADER_RETRY_AFTER, "1");
}

static enum MHD_Result decide(struct MHD_Connection *c, struct jev_server *s, struct request *rq) {
    if (atomic_fetch_add(&s->admitted, 1) + 1 > s->max_queue + 1) {
        atomic_fetch_sub(&s->admitted, 1);
        return refuse_busy(c, s, rq);
    }
    char *resp = NULL;
    int32_t http = 500;
    enum jev_request_format f = rq->route == ROUTE_DECISIONS ? JEV_REQUEST_OPENAI : JEV_REQUEST_SYSTEMONE;
    pthread_mutex_lock(&s->decide_lock);
    jev_decide_json(s->decider, jev_buf_str(&rq->body), rq->body.len, f, &resp, &http);
    pthread_mutex_unlock(&s->decide_lock);
    atomic_fetch_sub(&s->admitted, 1);
    return respond(c, rq, (unsigned)http, resp, NULL, NULL);
}

/* 200 {"status":"ok"} while the decider can answer; 503 {"status":"unavailable","error":...} once
 * its device failed for good, so that a load balancer's probe takes this replica out. */
static enum MHD_Result health(struct MHD_Connection *c, struct jev_server *s, struct request *rq) {
    char why[512];
    if (jev_decider_status(s->decider, why, sizeof why) == JEV_OK)
        return respond(c, rq, 200, strdup("{\"status\":\"ok\"}"), NULL, NULL);
    jev_jsonw_utf8_fix(why); /* the message may quote bytes from outside */
    struct jev_jsonw w;
    jev_jsonw_init(&w);
    jev_jsonw_raw(&w, "{\"status\":\"unavailable\",\"error\":");
    jev_jsonw_str(&w, why);
    jev_jsonw_raw(&w, "}");
    return respond(c, rq, 503, jev_jsonw_finish(&w), NULL, NULL);
}

/* ---- the access handler ---- */

/* The first call of a request: state, route, method, key and declared size. Returns MHD_YES
 * with nothing queued when the request may go on to its body. */
static enum MHD_Result on_headers(struct MHD_Connection *c, struct jev_server *s, struct request *rq, const char *url,
                                  const char *method) {
    rq->start_ms = jev_now_ms();
    snprintf(rq->id, sizeof rq->id, "req_%08x%012llx", s->id_prefix,
             (unsigned long long)atomic_fetch_add(&s->next_id, 1));
    snprintf(rq->method, sizeof rq->method, "%s", method);
    snprintf(rq->path, sizeof rq->path, "%s", url);
    rq->route = route_of(url);
    if (rq->route == ROUTE_NONE) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "server: no route %.100s (routes: POST /v1/systemone, POST /v1/decisions, "
                 "GET /v1/models, GET /health)",
                 url);
        return respond_error(c, rq, 404, "not_found_error", msg, NULL, NULL);
    }
    bool post = route_is_post(rq->route);
    bool ok = post ? !strcmp(method, "POST") : !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (!ok) {
        const char *allow = post ? "POST" : "GET, HEAD";
        char msg[200];
        snprintf(msg, sizeof msg, "server: %.100s takes %s, not %.16s", url, allow, method);
        return respond_error(c, rq, 405, "invalid_request_error", msg, MHD_HTTP_HEADER_ALLOW, allow);
    }
    /* /health stays open so that a load balancer can probe without the key */
    if (s->api_key && rq->route != ROUTE_HEALTH &&
        !key_matches(s, MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION)))
        return respond_error(c, rq, 401, "authentication_error",
                             "server: this server needs \"Authorization: Bearer <key>\" with its API key", NULL, NULL);
    unsigned long long n = 0;
    if (post && content_length(c, &n) && n > s->max_body) {
        char msg[200];
        snprintf(msg, sizeof msg, "server: the body has %llu bytes, over the limit of %zu (--max-body)", n,
                 s->max_body);
        return respond_error(c, rq, 413, "request_too_large_error", msg, NULL, NULL);
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    struct jev_server *s = cls;
    struct request *rq = *con_cls;
    if (!rq) {
        rq = calloc(1, sizeof *rq);
        if (!rq)
            return MHD_NO; /* closes the connection: nothing else can be done without memory */
        jev_buf_init(&rq->body, s->max_body);
        *con_cls = rq;
        return on_headers(c, s, rq, url, method);
    }
    if (rq->answered) {
        *upload_size = 0; /* a body that follows a refusal is dropped */
        return MHD_YES;
    }
    if (*upload_size) {
        bool ok = !route_is_post(rq->route) || body_append(s, rq, upload, *upload_size);
        *upload_size = 0;
        return ok ? MHD_YES : MHD_NO;
    }
    switch (rq->route) {
    case ROUTE_HEALTH: return health(c, s, rq);
    case ROUTE_MODELS: return respond(c, rq, 200, models_body(s), NULL, NULL);
    default: break;
    }
    if (rq->too_large) {
        char msg[200];
        snprintf(msg, sizeof msg, "server: the body is over the limit of %zu bytes (--max-body)", s->max_body);
        return respond_error(c, rq, 413, "request_too_large_error", msg, NULL, NULL);
    }
    return decide(c, s, rq);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    struct request *rq = *con_cls;
    if (rq) {
        jev_buf_free(&rq->body);
        free(rq);
        *con_cls = NULL;
    }
}

/* libmicrohttpd's own messages: kept while starting (they say why a bind failed), logged after. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    struct jev_server *s = cls;
    char line[256];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    pthread_mutex_lock(&s->log_lock);
    bool keep = s->starting && !s->start_msg[0];
    if (keep)
        snprintf(s->start_msg, sizeof s->start_msg, "%s", line);
    pthread_mutex_unlock(&s->log_lock);
    if (!keep)
        jev_log(JEV_LOG_DEBUG, "server: libmicrohttpd: %s", line);
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

static void server_free(struct jev_server *s) {
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    pthread_mutex_destroy(&s->decide_lock);
    pthread_mutex_destroy(&s->log_lock);
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
    if (p.http_threads < 0 || p.http_threads > 1024)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "server: http_threads %d is not in 0..1024", p.http_threads);
    if (p.idle_timeout_s < 0 || p.idle_timeout_s > 86400)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "server: idle_timeout_s %d is not in 0..86400", p.idle_timeout_s);
    struct jev_server *s = calloc(1, sizeof *s);
    if (!s)
        return jev_fail(err, JEV_ERR_NOMEM, "server: out of memory");
    pthread_mutex_init(&s->decide_lock, NULL);
    pthread_mutex_init(&s->log_lock, NULL);
    s->model = model;
    s->decider = decider;
    s->max_queue = p.max_queue;
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
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    if (s->addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    unsigned threads = p.http_threads ? (unsigned)p.http_threads : 4;
    s->starting = true;
    errno = 0;
    s->daemon = MHD_start_daemon(flags, (uint16_t)p.port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
                                 on_mhd_log, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&s->addr,
                                 MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)p.idle_timeout_s, MHD_OPTION_END);
    int e = errno;
    pthread_mutex_lock(&s->log_lock);
    s->starting = false;
    pthread_mutex_unlock(&s->log_lock);
    if (!s->daemon) {
        jev_fail(err, JEV_ERR_IO, "server: cannot listen on %s port %d: %s", host, p.port,
                 s->start_msg[0] ? s->start_msg
                 : e             ? strerror(e)
                                 : "libmicrohttpd refused to start");
        server_free(s);
        return err->status;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info && info->port ? (int32_t)info->port : p.port;
    *out = s;
    return JEV_OK;
}

int32_t jev_server_port(const struct jev_server *s) { return s->port; }

int32_t jev_server_queued(const struct jev_server *s) { return atomic_load(&s->admitted); }

void jev_server_lock(struct jev_server *s) { pthread_mutex_lock(&s->decide_lock); }
void jev_server_unlock(struct jev_server *s) { pthread_mutex_unlock(&s->decide_lock); }

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
