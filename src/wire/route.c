/*
 * route.c - the JSON entry point: a request body (System One or the OpenAI
 * shape) parsed, run on the decider, and answered with a response body or
 * an error body and the HTTP status that goes with it. Every failure of a
 * run maps to one error class here (map_error); the parsers' refusals carry
 * their own.
 */
#include "wire/route.h" // defines: jev_decide_body

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/response.h" // defines: jev_response_*

/*
 * Maps a failed run to a refusal the server can send. A failure the request caused is 4xx, so that
 * no client retries it (clients retry 5xx: the TypeScript SDK twice); 5xx is left to what the
 * server may get right the next time (a device fault, the time limit, a lost device) and to what
 * the spec names 501 (valid input this build cannot handle: a CMYK JPEG).
 */
static void map_error(enum jev_status s, const struct jev_error *err, struct jev_request_error *rerr) {
    memset(rerr, 0, sizeof *rerr);
    switch (s) {
    case JEV_ERR_FORMAT: /* bytes from the request are malformed: an image that does not decode */
    case JEV_ERR_IO:     /* an input the request names cannot be read */
        rerr->http_status = 400;
        rerr->type = "invalid_request_error";
        break;
    case JEV_ERR_CONTEXT_FULL: /* the prompt does not fit the engine's sizes */
        rerr->http_status = 400;
        rerr->type = "exceed_context_size_error";
        break;
    case JEV_ERR_NOMEM:
        /* a size limit the request passed (an image over 16384 pixels a side or 64 Mpx, a prompt
         * beyond any engine, a candidate trie over its limit; the message names it), or an
         * allocation the request's size made fail: the same request again fails the same way */
        rerr->http_status = 413;
        rerr->type = "request_too_large_error";
        break;
    case JEV_ERR_INVALID_ARG:
        rerr->http_status = 422;
        rerr->type = "unprocessable_entity_error";
        break;
    case JEV_ERR_UNSUPPORTED:
        rerr->http_status = 501;
        rerr->type = "not_supported_error";
        break;
    case JEV_ERR_ABORTED: /* the request's time limit: a gateway timeout, which clients retry */
        rerr->http_status = 504;
        rerr->type = "timeout";
        break;
    case JEV_ERR_DEVICE_LOST: /* this replica cannot answer any more: a balancer retries elsewhere */
        rerr->http_status = 503;
        rerr->type = "unavailable_error";
        break;
    case JEV_ERR_CUDA: /* a device fault that left the device usable: the next request may work */
    default:
        rerr->http_status = 0; /* internal: the response writer makes it a 500 */
        rerr->type = "server_error";
        break;
    }
    snprintf(rerr->message, sizeof rerr->message, "%s", err->msg);
}

/* The model's name as the response reports it: the directory's last component. */
static const char *model_name(const struct jev_decider *d) {
    const char *s = jev_decider_model(d)->dir;
    size_t n = strlen(s);
    while (n > 1 && s[n - 1] == '/')
        n--;
    const char *b = s;
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == '/')
            b = s + i + 1;
    return b;
}

enum jev_status jev_decide_answer(const struct jev_decider *d, enum jev_request_shape shape,
                                  const struct jev_request *r, enum jev_status s, const struct jev_decide_result *res,
                                  const struct jev_error *err, char **response, struct jev_request_error *rerr) {
    memset(rerr, 0, sizeof *rerr);
    *response = NULL;
    if (s == JEV_OK && res->generated && !res->valid) {
        /* a generated output that fails the schema answers nothing */
        s = JEV_ERR_FORMAT;
        rerr->http_status = 0;
        rerr->type = "server_error";
        snprintf(rerr->message, sizeof rerr->message,
                 "generate_json: the model's output does not meet the schema: %.400s", res->gen.reason);
    } else if (s != JEV_OK) {
        map_error(s, err, rerr);
    }
    if (s == JEV_OK) {
        const char *name = model_name(d);
        *response = shape == JEV_SHAPE_OPENAI ? jev_response_openai(r, &res->answers, name, &res->usage)
                                              : jev_response_systemone(r, &res->answers, name, &res->usage);
        if (!*response)
            s = JEV_ERR_NOMEM;
    } else {
        *response = jev_response_request_error(rerr);
    }
    return s;
}

enum jev_status jev_decide_body(struct jev_decider *d, const char *body, size_t len, enum jev_request_shape shape,
                                const struct jev_decide_params *p, char **response, struct jev_request_error *rerr,
                                struct jev_decide_result *result) {
    struct jev_request_error local;
    struct jev_request_error *re = rerr ? rerr : &local;
    memset(re, 0, sizeof *re);
    *response = NULL;
    if (result)
        memset(result, 0, sizeof *result);
    struct jev_request r;
    struct jev_request_opts opts = {.no_vision = !jev_decider_has_vision(d)};
    enum jev_status s;
    if (shape == JEV_SHAPE_SYSTEMONE)
        s = jev_request_parse_systemone(body, len, &opts, &r, re);
    else if (shape == JEV_SHAPE_OPENAI)
        s = jev_request_parse_openai(body, len, &opts, &r, re);
    else {
        s = JEV_ERR_INVALID_ARG;
        re->http_status = 400;
        re->type = "invalid_request_error";
        snprintf(re->message, sizeof re->message, "decide: a workload file is not a request body");
    }
    if (s != JEV_OK) {
        *response = jev_response_request_error(re);
        return s;
    }
    struct jev_decide_result res;
    struct jev_error err = {0};
    s = jev_decide_run(d, &r, p, &res, &err);
    s = jev_decide_answer(d, shape, &r, s, &res, &err, response, re);
    if (result && (s == JEV_OK || res.generated))
        *result = res;
    else
        jev_decide_result_free(&res);
    jev_request_free(&r);
    return s;
}

enum jev_status jev_decide_http(struct jev_decider *d, const char *body, size_t len, enum jev_request_shape shape,
                                char **response, int32_t *http_status, struct jev_decide_stats *stats) {
    struct jev_decide_params p = jev_decider_request_params(d);
    struct jev_request_error rerr = {0};
    struct jev_decide_result res;
    *response = NULL;
    enum jev_status s = jev_decide_body(d, body, len, shape, &p, response, &rerr, &res);
    if (http_status)
        *http_status = s == JEV_OK ? 200 : (rerr.http_status ? rerr.http_status : 500);
    if (stats)
        *stats = res.stats; /* zeroed when the run failed */
    jev_decide_result_free(&res);
    return s;
}

enum jev_status jev_decide_json(struct jev_decider *decider, const char *body, size_t len,
                                enum jev_request_format format, char **response, int32_t *http_status) {
    enum jev_request_shape shape = format == JEV_REQUEST_OPENAI ? JEV_SHAPE_OPENAI : JEV_SHAPE_SYSTEMONE;
    return jev_decide_http(decider, body, len, shape, response, http_status, NULL);
}
