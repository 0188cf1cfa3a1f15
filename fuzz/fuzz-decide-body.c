/*
 * fuzz-decide-body.c - arbitrary request bodies through the whole decision
 * route (jev_decide_body: parse, validate, image decode and preprocessing,
 * prompt rendering and tokenization, the forwards of a path, the response)
 * on the tiny synthetic model (configs/tiny.json, synthesized once into
 * build-fuzz/decide-tiny-hf). The path and scoring come from the input's
 * length, so every path sees inputs. Whatever the bytes, the route must
 * answer or refuse with an error body - never crash, leak or leave a
 * sequence of the engine held (but the decider's kept prefix, when the
 * input asks for prefix reuse).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "decide/pipeline-int.h" // defines: struct jev_decider (its kept prefix)
#include "wire/route.h"         // defines: jev_decide_body
#include "common/synth/synth.h"     // defines: jev_synth_write
#include "wire/request.h" // defines: jev_request_parse_*, struct jev_request_error

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MODEL_DIR "build-fuzz/decide-tiny-hf"

static struct jev_model *g_model;
static struct jev_engine *g_engine;
static struct jev_decider *g_d;

static void setup(void) {
    if (g_d)
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
            fprintf(stderr, "fuzz-decide-body: synth: %s (run from the repository root)\n", err.msg);
            abort();
        }
    }
    struct jev_model_params mp = jev_model_default_params();
    mp.n_threads = 1;
    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_batch = 8;
    ep.max_tokens = 1024;
    if (jev_model_open(MODEL_DIR, &mp, &g_model, &err) != JEV_OK || jev_engine_init(g_model, &ep, &g_engine) != JEV_OK ||
        jev_decider_init(g_model, g_engine, NULL, &g_d, &err) != JEV_OK) {
        fprintf(stderr, "fuzz-decide-body: set-up: %s\n", err.msg);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    struct jev_decide_params p = jev_decide_default_params();
    p.path = (enum jev_decide_path)(size % 3);
    p.scoring = (size / 3) % 2 ? JEV_SCORING_TEXT : JEV_SCORING_LABEL;
    p.batch = (int32_t)((size / 6) % 4); /* 0 = all */
    p.max_new_tokens = 6;                /* generation: a few steps are enough to exercise it */
    p.reuse_prefix = (size / 96) % 2;    /* the kept prefix and image, half of the time */
    enum jev_request_shape shape = (size / 24) % 4 == 3 ? JEV_SHAPE_OPENAI : JEV_SHAPE_SYSTEMONE;
    char *resp = NULL;
    struct jev_request_error rerr;
    struct jev_decide_result res;
    enum jev_status s = jev_decide_body(g_d, (const char *)data, size, shape, &p, &resp, &rerr, &res);
    if (!resp && s != JEV_ERR_NOMEM)
        abort(); /* every outcome has a body */
    if (s == JEV_OK || res.generated)
        jev_decide_result_free(&res);
    free(resp);
    if (g_engine->state.n_live != dc_kept_count(g_d))
        abort(); /* every sequence went back, but for the decider's kept prefix */
    return 0;
}
