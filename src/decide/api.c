/*
 * api.c - the public decision entry points of include/jev.h over the
 * pipeline (decide/pipeline.h): a decider per engine, one JSON body in, one
 * JSON body out. Everything else (paths, scoring modes, counters) stays in
 * the internal API that the CLI and the benchmark use.
 */
#include "decide/pipeline-int.h" // defines: struct jev_decider
#include "decide/pipeline.h"     // defines: jev_decider_init, jev_decide_body
#include "model/engine.h"    // defines: struct jev_engine, jev_engine_set_error

#include <stdlib.h>

enum jev_status jev_decider_open(struct jev_model *model, struct jev_engine *engine, struct jev_decider **out) {
    struct jev_error err = {0};
    struct jev_decider_params dp = jev_decider_default_params();
    *out = NULL;
    enum jev_status s = jev_decider_init(model, engine, &dp, out, &err);
    if (s != JEV_OK) {
        jev_engine_set_error(engine, &err);
        *out = NULL;
    }
    return s;
}

void jev_decider_close(struct jev_decider *decider) { jev_decider_free(decider); }

enum jev_status jev_decide_json(struct jev_decider *decider, const char *body, size_t len,
                                enum jev_request_format format, char **response, int32_t *http_status) {
    struct jev_decide_params p = jev_decide_default_params();
    p.timeout_ms = decider->timeout_ms;
    p.reuse_prefix = decider->reuse_prefix;
    struct jev_request_error rerr = {0};
    enum jev_request_shape shape = format == JEV_REQUEST_OPENAI ? JEV_SHAPE_OPENAI : JEV_SHAPE_SYSTEMONE;
    *response = NULL;
    enum jev_status s = jev_decide_body(decider, body, len, shape, &p, response, &rerr, NULL);
    if (http_status)
        *http_status = s == JEV_OK ? 200 : (rerr.http_status ? rerr.http_status : 500);
    return s;
}

void jev_decider_set_prefix_reuse(struct jev_decider *decider, bool on) {
    decider->reuse_prefix = on;
    if (!on) {
        dc_kept_drop(decider);
        dc_kept_image_drop(decider);
    }
}

void jev_decider_set_timeout(struct jev_decider *decider, double timeout_ms) {
    decider->timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
}

void jev_free(void *p) { free(p); }
