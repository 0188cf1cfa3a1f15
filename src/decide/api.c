/*
 * api.c - the public decider entry points of include/jev.h over the
 * pipeline (decide/pipeline.h): a decider per engine and its settings. The
 * JSON entry point, jev_decide_json, is the wire layer's (wire/route.c).
 */
#include "decide/pipeline-int.h" // defines: struct jev_decider
#include "decide/pipeline.h"     // defines: jev_decider_init
#include "model/engine.h"        // defines: struct jev_engine, jev_engine_set_error

#include <stdlib.h>

enum jev_status jev_decider_open(struct jev_model *model, struct jev_engine *engine, struct jev_decider **out) {
    struct jev_error err = {0};
    struct jev_decider_params dp = jev_decider_default_params();
    *out = NULL;
    /* an engine-less decider is the CLI's planner (pipeline.h), not a public one: it could not answer */
    if (!model || !engine)
        return JEV_ERR_INVALID_ARG;
    enum jev_status s = jev_decider_init(model, engine, &dp, out, &err);
    if (s != JEV_OK) {
        jev_engine_set_error(engine, &err);
        *out = NULL;
    }
    return s;
}

void jev_decider_close(struct jev_decider *decider) { jev_decider_free(decider); }

void jev_decider_set_prefix_reuse(struct jev_decider *decider, bool on) {
    atomic_store(&decider->reuse_prefix, on);
    if (!on) {
        dc_kept_drop(decider);
        dc_kept_image_drop(decider);
    }
}

void jev_decider_set_timeout(struct jev_decider *decider, double timeout_ms) {
    atomic_store(&decider->timeout_ms, timeout_ms > 0 ? timeout_ms : 0.0);
}

void jev_free(void *p) { free(p); }
